"""Small helpers with one home each; the bottom layer, importing nothing else of the plugin."""
