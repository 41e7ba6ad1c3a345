"""Coverage-guided fuzzing of what the broker reads from clients (atheris): targets.py
says what each target feeds and which errors it declares; scripts/fuzz runs them."""
