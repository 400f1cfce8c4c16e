"""The configuration: the paper experiments' run lists and the up-front validation."""
