"""The checker over very large histories on Spark (PySpark)."""
