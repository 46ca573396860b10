//! Block pool, block hashing and the prefix-cache-aware KV-cache manager.
