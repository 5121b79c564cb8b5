"""Small helpers with no model knowledge: atomic files, hashing, seeding, threads."""
from twotower.utils.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text, atomic_dir, read_json, sha256_file
from twotower.utils.runtime import seed_everything, set_threads

__all__ = [
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "atomic_dir",
    "read_json",
    "sha256_file",
    "seed_everything",
    "set_threads",
]
