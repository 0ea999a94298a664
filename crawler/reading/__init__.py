"""Reading a page: bytes to text (encodings), HTML to a tree, the tree to text, links and head; PDFs and other documents; languages; redirects and meta refreshes."""
