def test_login():
    password = 'password123'
    assert login(password)
