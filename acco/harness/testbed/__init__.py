"""The performance testbed: an emulated slow interconnect between local workers (network namespaces
joined by tc-shaped veth pairs, or an in-process delay where namespaces are not possible)."""
