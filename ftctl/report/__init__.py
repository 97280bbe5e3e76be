"""Reports: self-contained HTML pages of runs and comparisons."""
