"""Process, memory and interpreter workarounds, fenced away from the stages."""
