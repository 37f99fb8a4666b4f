// Tests of the diskcache tool.
