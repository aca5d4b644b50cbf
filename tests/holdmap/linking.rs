//! holdmap tests: linking (filled in by issue 14's work).
