"""Text utilities shared by the layers above (transcripts, analyzers, replay): no store, no analyzer."""
