//! One request line read as JSON-RPC: the envelope's rules (which fields, which types), batches,
//! and how each answer is shaped for the revision it is under.
