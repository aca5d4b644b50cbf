//! Which running processes are AI coding agents, for `stop_agent_ports`: until part 2's
//! detection, an agent is a process whose executable (or runtime entry script) is a known agent
//! program, and what it started is its process tree below it.
