//! The operating system, read and asked through one API: who is on the other end of a socket
//! (`peer`). Shared by both binaries; it knows nothing of Holdcall's policy, journal or wording.

pub mod peer;
