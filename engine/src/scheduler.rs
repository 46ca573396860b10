//! vLLM v1 scheduling rules (see DESIGN.md "Scheduler semantics").
