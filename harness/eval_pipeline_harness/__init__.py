"""What the tests, benchmarks and demo data of eval_pipeline need and the product never imports."""
