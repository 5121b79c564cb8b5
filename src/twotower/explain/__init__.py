"""explain sub-package."""
