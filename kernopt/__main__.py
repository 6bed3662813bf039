from kernopt.cli import app

app(prog_name="kernopt")
