"""Built-in plugins. Each module registers its scorers when imported."""
