def run(x):
    return x
