const password = "${DB_PASSWORD}";
const secret = "{{ secrets.SIGNING }}";
