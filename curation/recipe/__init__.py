"""Recipes: typed, validated, fingerprinted descriptions of a curation run."""
from curation.recipe.load import InputFile, LoadedRecipe, load_recipe
from curation.recipe.schema import Recipe, Source

__all__ = ["InputFile", "LoadedRecipe", "Recipe", "Source", "load_recipe"]
