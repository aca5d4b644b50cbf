//! The port tools: `list_ports`, `explain_port`, `inspect_port`, `find_free_port`,
//! `wait_for_port`.

use crate::holdmap::tool::Tool;

pub(crate) const TOOLS: &[Tool] = &[];
