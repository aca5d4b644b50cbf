//! frame (stub, being written)
