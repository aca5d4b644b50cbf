//! The stop tools: `stop_port` and `stop_agent_ports`. Preview by default; execute only with a
//! matching one-use handle, after re-collecting and re-checking every owner.

use crate::holdmap::tool::Tool;

pub(crate) const TOOLS: &[Tool] = &[];
