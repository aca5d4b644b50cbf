//! holdmap tests: topology (filled in by issue 14's work).
