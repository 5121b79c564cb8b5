"""search sub-package."""
