//! holdmap tests: stops (filled in by issue 14's work).
