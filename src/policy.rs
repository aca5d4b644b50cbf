//! policy (stub, being written)
