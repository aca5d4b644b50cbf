//! The protocol's own methods: initialize, server/discover, ping, tools/list, tools/call's
//! parameters, resources and prompts.
