"""Reports written to a directory: the validation report and the log report."""
