"""Record batches (magic v2) as opaque bytes: views, validation entry points, codecs."""
