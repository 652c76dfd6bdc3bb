"""Recipes: typed, validated, fingerprinted descriptions of a curation run."""
from curation.recipe.load import InputFile, LoadedRecipe, fingerprint, load_recipe, sha256_file
from curation.recipe.schema import Recipe, Source

__all__ = ["InputFile", "LoadedRecipe", "Recipe", "Source", "fingerprint", "load_recipe", "sha256_file"]
