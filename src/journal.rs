//! journal (stub, being written)
