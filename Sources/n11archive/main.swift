print("n11archive")
