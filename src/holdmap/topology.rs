//! Which local services talk to which (`get_topology`), grouped into clusters, and a
//! dependency-ordered dry-run plan for stopping one (`plan_cluster_stop`, never executes).

use crate::holdmap::tool::Tool;

pub(crate) const TOOLS: &[Tool] = &[];
