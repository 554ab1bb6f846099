"""What a lab writes beside Folklore rather than inside it: not part of the installed package."""
