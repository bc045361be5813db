"""Results store (DuckDB) and the dataset view the learning side reads."""

from .dataset import Dataset

__all__ = ["Dataset"]
