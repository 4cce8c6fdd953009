"""Text processing: segmentation into index terms."""
