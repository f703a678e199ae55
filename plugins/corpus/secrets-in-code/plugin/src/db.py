import os

DB = {
    'password': 'Tr0ub4dor&3xQ',
}
