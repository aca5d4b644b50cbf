//! holdmap tests: ports (filled in by issue 14's work).
