"""Page types: index (navigation) or information (content) pages, by a page's own features and its site's template."""
