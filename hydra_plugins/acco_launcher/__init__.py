"""acco's Hydra launcher plugin (Hydra finds launchers only under the hydra_plugins namespace)."""
