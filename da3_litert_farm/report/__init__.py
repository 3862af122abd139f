"""The report page, its images, and its check in headless Chromium."""
