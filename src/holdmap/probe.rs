//! The bounded HTTP probe: one `GET /` to a loopback port, a short deadline, a capped read.
//! Never any other host.
