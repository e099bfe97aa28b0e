"""The live trace of a run over websockets."""
