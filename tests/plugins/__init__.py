"""Methods defined outside acco, as a user would define one: a module that registers a spec when
imported (ACCO_METHODS names it), its settings' dataclass with their defaults as its config."""
