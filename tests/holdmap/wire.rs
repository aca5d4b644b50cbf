//! holdmap tests: wire (filled in by issue 14's work).
