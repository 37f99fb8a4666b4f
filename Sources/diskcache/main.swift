// Replaced by the command-line tool.
print("diskcache")
