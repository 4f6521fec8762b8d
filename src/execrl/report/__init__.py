"""The self-contained HTML report and its figures."""
