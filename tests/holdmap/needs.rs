//! (skeleton: tests of this tool go here)
